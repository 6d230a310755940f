#!/usr/bin/env node
// Operator CLI entry: registers tsx so the TypeScript sources run without a build step.
import { register } from 'tsx/esm/api';

register();
const { main } = await import('../src/cli.ts');
process.exitCode = await main(process.argv.slice(2));
