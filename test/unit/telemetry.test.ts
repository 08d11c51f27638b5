/** Which OpenTelemetry variables switch traces on, and where the spans go (src/telemetry/tracing.ts). */
import {expect} from 'chai'
import {providerName} from '../../src/telemetry/conventions.js'
import {DEFAULT_FLUSH_TIMEOUT_MS, exportSettings} from '../../src/telemetry/tracing.js'

describe('telemetry: the OTEL_* variables', () => {
  it('traces are off unless an endpoint is set, and when the SDK or the traces exporter is switched off', () => {
    expect(exportSettings({})).to.equal(null)
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: '  '})).to.equal(null)
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_SDK_DISABLED: 'true'})).to.equal(null)
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_TRACES_EXPORTER: 'none'})).to.equal(null)
  })

  it('the general endpoint gets /v1/traces; the traces endpoint is the whole URL and wins', () => {
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318'})).to.include({
      url: 'http://c:4318/v1/traces',
      timeoutMs: DEFAULT_FLUSH_TIMEOUT_MS,
      serviceName: 'pipe',
    })
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318/base/'})).to.include({url: 'http://c:4318/base/v1/traces'})
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://t/custom'})).to.include({
      url: 'https://t/custom',
    })
  })

  it('reads the timeout, the service name and the resource attributes as the SDKs do', () => {
    const settings = exportSettings({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318',
      OTEL_EXPORTER_OTLP_TIMEOUT: '800',
      OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: '250',
      OTEL_RESOURCE_ATTRIBUTES: 'deployment.environment=ci,team=a%20b,broken',
      OTEL_SERVICE_NAME: 'pipe-ci',
    })
    expect(settings).to.deep.include({timeoutMs: 250, serviceName: 'pipe-ci', resource: {'deployment.environment': 'ci', team: 'a b'}})
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TIMEOUT: 'soon'})).to.include({timeoutMs: DEFAULT_FLUSH_TIMEOUT_MS})
  })

  it('names the problem with an endpoint that is not an http URL or a protocol pipe does not send', () => {
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318'}))
      .to.have.property('problem')
      .that.contains('http or https')
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'not a url'}))
      .to.have.property('problem')
      .that.contains('is not a URL')
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc'}))
      .to.have.property('problem')
      .that.contains('http/json')
    expect(
      exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/json'}),
    ).to.include({url: 'http://c:4318/v1/traces', protocol: 'http/json'})
  })

  it('takes http/protobuf (the default of many environments) and http/json; unset is http/json', () => {
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf'})).to.include({protocol: 'http/protobuf'})
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318', OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: 'http/protobuf'})).to.include({
      protocol: 'http/protobuf',
    })
    expect(exportSettings({OTEL_EXPORTER_OTLP_ENDPOINT: 'http://c:4318'})).to.include({protocol: 'http/json'})
  })
})

describe('gen_ai.provider.name of a model call', () => {
  it("is the pipeline's provider.name, else what the endpoint's host names, else _OTHER", () => {
    expect(providerName('ollama', 'api.openai.com')).to.equal('ollama')
    expect(providerName(undefined, 'api.openai.com')).to.equal('openai')
    expect(providerName(undefined, 'myres.openai.azure.com')).to.equal('azure.ai.openai')
    expect(providerName(undefined, 'api.anthropic.com')).to.equal('anthropic')
    expect(providerName(undefined, 'api.mistral.ai')).to.equal('mistral_ai')
    expect(providerName(undefined, 'generativelanguage.googleapis.com')).to.equal('gcp.gemini')
    expect(providerName(undefined, '127.0.0.1:11434')).to.equal('ollama')
    expect(providerName(undefined, 'gateway.example.com')).to.equal('_OTHER')
    expect(providerName(undefined, 'notopenai.com')).to.equal('_OTHER')
    expect(providerName(undefined, null)).to.equal('_OTHER')
  })
})
