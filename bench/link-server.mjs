// After the bench's build: links bench/dist/src to the server's build (../../dist). The bench's
// compiled modules import the server's by their source paths (../../src/..., see tsconfig.json);
// through the link those are the server's own dist/ modules: one copy of each in a process, and
// paths relative to them (proto/im.proto, package.json) stay right.

import { rmSync, symlinkSync } from 'node:fs';

const link = new URL('./dist/src', import.meta.url);
rmSync(link, { recursive: true, force: true });
symlinkSync('../../dist', link, 'dir');
