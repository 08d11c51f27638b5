/** The ajv options every validator is built with, at run time and in the standalone build alike. */
export const ajvOptions = {allErrors: true, verbose: true, discriminator: true, allowUnionTypes: true, strict: true, strictRequired: false} as const

/**
 * The ajv module that compiles a schema: its `$schema` picks the draft. The pipeline schema is
 * 2020-12 (unevaluatedProperties lets every step kind share the common step fields); the others are draft-07.
 */
export function ajvModuleFor(schema: {$schema?: unknown}): 'ajv' | 'ajv/dist/2020' {
  return typeof schema.$schema === 'string' && schema.$schema.includes('2020-12') ? 'ajv/dist/2020' : 'ajv'
}
