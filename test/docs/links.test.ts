// Every link to a heading in the project's documents leads to one: `[text](#anchor)` within a
// document and `[text](<another document>#anchor)` between them, anchors made from headings as
// GitHub makes them (lower case, punctuation dropped, spaces to hyphens, a repeated heading
// numbered -1, -2).

import t from 'tap';
import { existsSync, readFileSync } from 'node:fs';

const ROOT = new URL('../../', import.meta.url);
const DOCUMENTS = ['README.md', 'OPERATIONS.md', 'PROTOCOL.md', 'bench/README.md'];

/** GitHub's anchor for a heading's text. */
function anchorOf(heading: string): string {
  return heading
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, '')
    .replaceAll(' ', '-');
}

/** The anchors of a Markdown document's headings (fenced code left out). */
function anchorsOf(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of text.split('\n')) {
    if (line.startsWith('```')) fenced = !fenced;
    const heading = fenced ? null : /^#{1,6} +(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const base = anchorOf(heading[1]!);
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    anchors.add(n === 0 ? base : `${base}-${n}`);
  }
  return anchors;
}

t.test('anchorOf makes the anchors GitHub makes', async (t) => {
  t.equal(anchorOf('Capacity and sizing'), 'capacity-and-sizing');
  t.equal(anchorOf('The inbox and what an acknowledged message survives'), 'the-inbox-and-what-an-acknowledged-message-survives');
  t.equal(anchorOf('`start` and `worker`'), 'start-and-worker');
  t.equal(anchorOf('Codec: `npm run bench:codec`'), 'codec-npm-run-benchcodec');
  t.equal(anchorOf('14. Conversations (extension)'), '14-conversations-extension');
  t.equal(anchorOf('Idle connections (`switchboard bench idle --connections 15000`)'), 'idle-connections-switchboard-bench-idle---connections-15000');
});

t.test('every anchor a document links to is a heading of the document it names', async (t) => {
  const anchors = new Map(DOCUMENTS.map((doc) => [doc, anchorsOf(readFileSync(new URL(doc, ROOT), 'utf8'))]));
  let links = 0;
  for (const doc of DOCUMENTS) {
    const text = readFileSync(new URL(doc, ROOT), 'utf8');
    for (const m of text.matchAll(/\]\(([^)\s#]*)#([^)\s]+)\)/g)) {
      const target = m[1] === '' ? doc : new URL(m[1]!, new URL(doc, ROOT)).pathname.slice(new URL(ROOT).pathname.length);
      if (!anchors.has(target)) {
        t.ok(existsSync(new URL(target, ROOT)), `${doc} links to ${target}, which exists`);
        continue;
      }
      links++;
      t.ok(anchors.get(target)!.has(m[2]!), `${doc}: #${m[2]} is a heading of ${target}`);
    }
  }
  t.ok(links > 20, `links checked: ${links}`);
});
