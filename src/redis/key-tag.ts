// The hash tag of a Redis key: `{<id>}` puts every key of one user (or group) in one Redis
// Cluster slot, so that one script can touch them all. Redis takes the tag up to the first `}`,
// so an id containing `}` (possible with --allow-unknown-recipients) would end its tag early:
// two ids could then share keys. The id is escaped so that the tag is exactly the id: `%`, `{`
// and `}` become `%25`, `%7B` and `%7D`, and the empty id (whose `{}` Redis would not take for a
// tag) becomes `%`. Account names (a-z 0-9 _ . -) are unchanged.

const HAS_SPECIAL = /[%{}]/;
const SPECIAL = /[%{}]/g;
const ESCAPES: Record<string, string> = { '%': '%25', '{': '%7B', '}': '%7D' };

export function keyTag(id: string): string {
  if (id === '') return '{%}';
  return `{${HAS_SPECIAL.test(id) ? id.replace(SPECIAL, (c) => ESCAPES[c]!) : id}}`;
}
