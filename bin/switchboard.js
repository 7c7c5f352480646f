#!/usr/bin/env node
import { main } from '../dist/cli/main.js';

// Every chat message allocates a few small frames; Buffer.allocUnsafe carves them from a shared
// slab. A 64 KiB slab instead of 8 KiB means 8x fewer slab allocations (+8% delivered msg/s in
// the chat bench, bench/README.md).
Buffer.poolSize = 64 * 1024;

process.exitCode = await main(process.argv.slice(2));
