/**
 * `npm run flash-sale -- --instances 4 --buyers 2000 --stock 100 --mode fenced --chaos pause --seed 7`
 *
 * Prints a progress line on stderr while the sale runs, then the report (a table, or JSON with
 * `--json`) on stdout. Exit code: 0, or 1 when a violation happened in `fenced` mode (the mode
 * that promises none), or 2 for a bad command line or a run that could not start (runCommand, on
 * the FlashSaleSetupError the run throws).
 */
import { EXIT_CODES, runCommand } from '@fencelock/devkit/cli'
import { exitCodeOf, FlashSaleAbortedError, runFlashSale } from './flash-sale.js'
import { FLASH_SALE_CLI, parseFlashSaleArgs } from './flash-sale-args.js'
import { formatReport, progressWriter, reportJson } from './report-format.js'

await runCommand(FLASH_SALE_CLI, process.argv.slice(2), async () => {
  const command = parseFlashSaleArgs(process.argv.slice(2))
  const progress = progressWriter()
  // Ctrl-C: the run stops its crowd, then stops what it started (instances by PID, a spawned
  // redis-server, the embedded database) and drops its schema. A second Ctrl-C exits at once
  // (the exit hooks still kill the instances and a spawned redis-server).
  const controller = new AbortController()
  process.on('SIGINT', () => {
    if (controller.signal.aborted) process.exit(130)
    controller.abort()
    progress.end()
    console.error('\nflash-sale: interrupted, stopping what it started (Ctrl-C again to force)')
  })
  try {
    const report = await runFlashSale(
      { ...command.options, instanceLogs: command.verbose ? 'inherit' : 'ignore' },
      (p) => {
        if (!controller.signal.aborted) progress.update(p)
      },
      {},
      controller.signal,
    )
    progress.end()
    console.log(command.json ? reportJson(report) : formatReport(report))
    return exitCodeOf(report)
  } catch (error) {
    progress.end()
    if (error instanceof FlashSaleAbortedError) return EXIT_CODES.interrupted
    throw error
  }
})
