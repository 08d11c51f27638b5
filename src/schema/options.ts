/** The ajv options every validator is built with, at run time and in the standalone build alike. */
export const ajvOptions = {allErrors: true, verbose: true, discriminator: true, allowUnionTypes: true, strict: true, strictRequired: false} as const
