#!/usr/bin/env node
// The `fencelock-guard` command of the package (its `bin`): see guard/guard-cli.ts.
import { runGuardCli } from './guard/guard-cli.js'

const { code, stdout, stderr } = runGuardCli(process.argv.slice(2))
process.stdout.write(stdout)
process.stderr.write(stderr)
process.exitCode = code
