/**
 * The attribute names and values pipe's spans use, from OpenTelemetry's semantic conventions
 * (@opentelemetry/semantic-conventions, pinned at 1.45.0): the stable names from its main entry, the
 * GenAI ones from its `/incubating` entry, as that release defines them. The GenAI conventions are
 * still in development and rename things between releases: a name taken from the package, never
 * written by hand, changes with the pinned version and nowhere else. Imported only by otlp.ts,
 * which loads when a collector is configured; the bundle keeps only the strings used.
 */
import {ATTR_ERROR_TYPE, ATTR_SERVER_ADDRESS, ATTR_SERVER_PORT, ATTR_SERVICE_NAME} from '@opentelemetry/semantic-conventions'
import {
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MAX_TOKENS,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_REQUEST_TEMPERATURE,
  ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
  ATTR_GEN_AI_RESPONSE_MODEL,
  ATTR_GEN_AI_TOOL_CALL_ID,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_TOOL_TYPE,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  ATTR_GEN_AI_WORKFLOW_NAME,
  GEN_AI_OPERATION_NAME_VALUE_CHAT,
  GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
  GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT,
  GEN_AI_OPERATION_NAME_VALUE_INVOKE_WORKFLOW,
  GEN_AI_PROVIDER_NAME_VALUE_ANTHROPIC,
  GEN_AI_PROVIDER_NAME_VALUE_AWS_BEDROCK,
  GEN_AI_PROVIDER_NAME_VALUE_AZURE_AI_OPENAI,
  GEN_AI_PROVIDER_NAME_VALUE_COHERE,
  GEN_AI_PROVIDER_NAME_VALUE_DEEPSEEK,
  GEN_AI_PROVIDER_NAME_VALUE_GCP_GEMINI,
  GEN_AI_PROVIDER_NAME_VALUE_GROQ,
  GEN_AI_PROVIDER_NAME_VALUE_MISTRAL_AI,
  GEN_AI_PROVIDER_NAME_VALUE_OPENAI,
  GEN_AI_PROVIDER_NAME_VALUE_PERPLEXITY,
  GEN_AI_PROVIDER_NAME_VALUE_X_AI,
} from '@opentelemetry/semantic-conventions/incubating'

export const ATTR = {
  errorType: ATTR_ERROR_TYPE,
  serverAddress: ATTR_SERVER_ADDRESS,
  serverPort: ATTR_SERVER_PORT,
  serviceName: ATTR_SERVICE_NAME,
  operation: ATTR_GEN_AI_OPERATION_NAME,
  provider: ATTR_GEN_AI_PROVIDER_NAME,
  workflow: ATTR_GEN_AI_WORKFLOW_NAME,
  agent: ATTR_GEN_AI_AGENT_NAME,
  requestModel: ATTR_GEN_AI_REQUEST_MODEL,
  temperature: ATTR_GEN_AI_REQUEST_TEMPERATURE,
  maxTokens: ATTR_GEN_AI_REQUEST_MAX_TOKENS,
  responseModel: ATTR_GEN_AI_RESPONSE_MODEL,
  finishReasons: ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
  inputTokens: ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  outputTokens: ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  toolName: ATTR_GEN_AI_TOOL_NAME,
  toolType: ATTR_GEN_AI_TOOL_TYPE,
  toolCallId: ATTR_GEN_AI_TOOL_CALL_ID,
} as const

export const OPERATION = {
  chat: GEN_AI_OPERATION_NAME_VALUE_CHAT,
  executeTool: GEN_AI_OPERATION_NAME_VALUE_EXECUTE_TOOL,
  invokeAgent: GEN_AI_OPERATION_NAME_VALUE_INVOKE_AGENT,
  invokeWorkflow: GEN_AI_OPERATION_NAME_VALUE_INVOKE_WORKFLOW,
} as const

/**
 * The providers an endpoint's host names, by the host's end: pipe speaks the chat-completions API,
 * which many providers offer, so the host (not the client library) says whose models answer.
 */
const BY_HOST: Array<[RegExp, string]> = [
  [/(^|\.)openai\.com$/, GEN_AI_PROVIDER_NAME_VALUE_OPENAI],
  [/(^|\.)openai\.azure\.com$/, GEN_AI_PROVIDER_NAME_VALUE_AZURE_AI_OPENAI],
  [/(^|\.)anthropic\.com$/, GEN_AI_PROVIDER_NAME_VALUE_ANTHROPIC],
  [/(^|\.)mistral\.ai$/, GEN_AI_PROVIDER_NAME_VALUE_MISTRAL_AI],
  [/(^|\.)groq\.com$/, GEN_AI_PROVIDER_NAME_VALUE_GROQ],
  [/(^|\.)deepseek\.com$/, GEN_AI_PROVIDER_NAME_VALUE_DEEPSEEK],
  [/(^|\.)x\.ai$/, GEN_AI_PROVIDER_NAME_VALUE_X_AI],
  [/(^|\.)perplexity\.ai$/, GEN_AI_PROVIDER_NAME_VALUE_PERPLEXITY],
  [/(^|\.)cohere\.(com|ai)$/, GEN_AI_PROVIDER_NAME_VALUE_COHERE],
  [/^generativelanguage\.googleapis\.com$/, GEN_AI_PROVIDER_NAME_VALUE_GCP_GEMINI],
  [/^bedrock-runtime\.[a-z0-9-]+\.amazonaws\.com$/, GEN_AI_PROVIDER_NAME_VALUE_AWS_BEDROCK],
  // Not in the conventions' list of well-known values (a custom value is allowed): Ollama's own host, or its port.
  [/(^|\.)ollama\.(com|ai)$/, 'ollama'],
]

/** What an endpoint whose host says nothing is named: the conventions' value for one outside their list. */
export const OTHER_PROVIDER = '_OTHER'

/**
 * gen_ai.provider.name of a model call: the pipeline's provider.name when it gives one, else what
 * the endpoint's host (host[:port]) names, else OTHER_PROVIDER.
 */
export function providerName(configured: string | undefined, host: string | null): string {
  if (configured) return configured
  if (!host) return OTHER_PROVIDER
  const port = /:(\d+)$/.exec(host)?.[1]
  const name = host
    .replace(/:\d+$/, '')
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
  for (const [pattern, provider] of BY_HOST) if (pattern.test(name)) return provider
  // Ollama's default port: a local Ollama is reached by address, not by a name that says so.
  if (port === '11434') return 'ollama'
  return OTHER_PROVIDER
}
