// The test suite's default reporter (package.json, "tap"."reporter"): the suite's raw TAP is
// ~24 000 lines, nearly all of them passing assertions. This keeps one line per test file, every
// failure in full (its `not ok` line and YAML diagnostics, verbatim and under the `# Subtest:`
// lines leading to it), skipped and todo assertions, bail-outs, and the closing comments
// (`# { total: N, pass: P, fail: F }`, which .ci/run reads). Still TAP, plain text, no escapes:
// the same on a terminal and in a CI log. The whole stream: `npm test -- --reporter=tap`.
//
// Plain JavaScript: tap imports it in its runner process, which loads no TypeScript.

import { Transform } from 'node:stream';

const TEST_LINE = /^( *)(not ok|ok)\b/;
const SUBTEST = /^( *)# Subtest: /;
const SKIP_OR_TODO = /# (SKIP|TODO)\b/i;

export default class CompactReporter extends Transform {
  #partial = '';
  /** The `# Subtest:` lines enclosing the current line, by depth, and whether each was printed. */
  #headers = [];
  /** Just after a failure: the indentation its YAML block would open (`---`) and close (`...`) at. */
  #yamlAfter = null;
  /** Inside a failure's YAML block: the indentation of its closing `...`. */
  #yamlEnd = null;

  _transform(chunk, _encoding, done) {
    const lines = (this.#partial + chunk.toString()).split('\n');
    this.#partial = lines.pop();
    this.push(lines.map((line) => this.#line(line)).join(''));
    done();
  }

  _flush(done) {
    if (this.#partial) this.push(this.#line(this.#partial));
    done();
  }

  /** What to print for one line of TAP ('' for nothing). */
  #line(line) {
    if (this.#yamlAfter !== null) {
      const opens = line === `${this.#yamlAfter}---`;
      if (opens) this.#yamlEnd = this.#yamlAfter;
      this.#yamlAfter = null;
      if (opens) return `${line}\n`;
    }
    if (this.#yamlEnd !== null) {
      if (line === `${this.#yamlEnd}...`) this.#yamlEnd = null;
      return `${line}\n`;
    }
    const subtest = SUBTEST.exec(line);
    if (subtest) {
      const depth = subtest[1].length / 4;
      this.#headers.length = depth;
      this.#headers.push({ line, printed: false });
      // A test file's header is its result line's context only if something in it is shown.
      return '';
    }
    const test = TEST_LINE.exec(line);
    if (test) {
      const indent = test[1];
      const depth = indent.length / 4;
      const failed = test[2] === 'not ok';
      if (!failed && depth > 0 && !SKIP_OR_TODO.test(line)) return '';
      // The result line of a subtest closes it: its own header is not its context.
      const context = this.#enclosing(depth);
      this.#headers.length = Math.min(this.#headers.length, depth);
      if (failed) this.#yamlAfter = `${indent}  `;
      return `${context}${line}\n`;
    }
    if (/^ *Bail out!/.test(line)) return `${line}\n`;
    if (/^# /.test(line) || /^1\.\.\d+/.test(line) || /^TAP version/.test(line)) return `${line}\n`;
    return '';
  }

  /** The headers enclosing a result line at `depth` not yet printed, printed now. */
  #enclosing(depth) {
    let out = '';
    for (let d = 0; d < Math.min(depth, this.#headers.length); d++) {
      const header = this.#headers[d];
      if (header && !header.printed) {
        out += `${header.line}\n`;
        header.printed = true;
      }
    }
    return out;
  }
}
