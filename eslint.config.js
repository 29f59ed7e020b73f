// Lint of every workspace, the benchmarks and the scripts (`npm run lint`; part of `npm test`):
// ESLint's and typescript-eslint's recommended rules, and the two type-aware rules that keep the
// promise "nothing crashes the host process": a promise is awaited, returned, or handled on
// purpose (`void` marks a deliberate fire-and-forget whose rejection is handled inside it), and no
// promise goes where a plain value is expected (an async callback to a void-returning API).
// Zero warnings: every workspace runs it with --max-warnings 0.
import js from '@eslint/js'
import tseslint from 'typescript-eslint'

export default tseslint.config(
  {
    ignores: [
      '**/dist/**',
      '**/node_modules/**',
      'generated/**',
      'scratch/**',
      '**/coverage/**',
      // Compiled on purpose with type errors (test/typed-models.test.ts).
      'packages/fencing/test/fixtures/**',
      // The scratch consumer of the packed packages: plain JavaScript for Node, checked by running it.
      'packages/pack-check/test/consumer/**',
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      // A module-level `let` read by a signal handler before its one assignment is still a `let`.
      'prefer-const': ['error', { ignoreReadBeforeAssign: true }],
    },
  },
  {
    files: ['**/*.ts', '**/*.tsx', '**/*.mts'],
    languageOptions: {
      parserOptions: {
        // prisma.config.ts sits at the root, where no tsconfig.json is: it gets the scripts' options
        // (scripts/tsconfig.json also typechecks it).
        projectService: { allowDefaultProject: ['prisma.config.ts'], defaultProject: 'scripts/tsconfig.json' },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      '@typescript-eslint/no-floating-promises': 'error',
      '@typescript-eslint/no-misused-promises': 'error',
      // `_`-prefixed names are deliberately unused (a destructured field left out, a parameter kept for its position).
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_', caughtErrors: 'none' }],
    },
  },
  {
    // Formatted by Prettier (120 columns, `npm run format`, checked by the package's lint); what
    // Prettier does not break — comments — kept to 120 columns too. A string (a test's title, an
    // error message) is one string: it may run longer rather than be cut in pieces.
    files: ['packages/lock/**/*.ts'],
    rules: {
      'max-len': ['error', { code: 120, ignoreStrings: true, ignoreTemplateLiterals: true, ignoreRegExpLiterals: true, ignoreUrls: true }],
    },
  },
  {
    files: ['**/*.js', '**/*.mjs', '**/*.cjs'],
    languageOptions: {
      globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', URL: 'readonly', fetch: 'readonly', AbortSignal: 'readonly' },
    },
  },
)
