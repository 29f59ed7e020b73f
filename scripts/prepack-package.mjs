// `prepack` of each published package: puts the repository's LICENSE into the package folder, so
// the tarball carries it (npm packs only what is inside the package). The copies are gitignored.
import { copyFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = join(dirname(fileURLToPath(import.meta.url)), '..')
copyFileSync(join(root, 'LICENSE'), join(process.cwd(), 'LICENSE'))
