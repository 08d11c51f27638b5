/** Chooses the model provider for a run. */
import type {ProviderSettings} from '../types/pipeline.js'
import type {RunRecord} from '../types/run.js'
import type {Provider} from './types.js'

export type ProviderChoice = 'auto' | 'offline'

export interface ProviderPlan {
  record: RunRecord['provider']
  create: () => Promise<Provider>
}

/** The provider a run uses, and a factory that loads it on first use. */
export function planProvider(_choice: ProviderChoice | undefined, _settings: ProviderSettings | undefined): ProviderPlan {
  let provider: Provider | undefined
  return {
    record: {kind: 'offline', model: 'offline-rules-1', endpoint_host: null},
    create: async () => {
      if (!provider) {
        const {OfflineProvider} = await import('./offline/provider.js')
        provider = new OfflineProvider()
      }
      return provider
    },
  }
}
