/** {{variable}} placeholders in prompt files. */

export const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}/g

export interface VariableUse {
  name: string
  line: number
  col: number
}

export function variablesUsed(template: string): VariableUse[] {
  const uses: VariableUse[] = []
  template.split('\n').forEach((text, i) => {
    for (const match of text.matchAll(PLACEHOLDER)) uses.push({name: match[1]!, line: i + 1, col: match.index + 1})
  })
  return uses
}
