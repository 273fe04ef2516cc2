#!/usr/bin/env node
// The command runs from the TypeScript source (this package is not built yet): tsx loads it.
import { register } from 'tsx/esm/api';

register();
await import('../src/main.ts');
