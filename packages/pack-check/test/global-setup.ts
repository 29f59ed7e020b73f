// One scratch project for the whole run, shared by every test file (support/scratch-project.ts):
// `npm install` of the tarballs and their peers is most of this package's test time.
import type { TestProject } from 'vitest/node'
import { createScratchProject, removeScratchProject, type ScratchProject } from './support/scratch-project.js'

declare module 'vitest' {
  export interface ProvidedContext {
    scratch: ScratchProject
  }
}

let project: ScratchProject | undefined

export default function setup(context: TestProject): () => void {
  project = createScratchProject()
  context.provide('scratch', project)
  return () => removeScratchProject(project)
}
