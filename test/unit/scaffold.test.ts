import {expect} from 'chai'
import {schemaRef} from '../../src/config/scaffold.js'

describe('pipe init: the $schema line', () => {
  it('is relative when the project and the schemas share a directory below the root', () => {
    expect(schemaRef('/home/ann/proj', '/home/ann/proj/node_modules/pipe/schemas')).to.equal('node_modules/pipe/schemas/pipeline.schema.json')
    expect(schemaRef('/work/pipe/examples/x', '/work/pipe/schemas')).to.equal('../../schemas/pipeline.schema.json')
  })

  it('is absolute when only the filesystem root is shared, so moving the project keeps it true', () => {
    expect(schemaRef('/tmp/proj', '/usr/lib/node_modules/pipe/schemas')).to.equal('/usr/lib/node_modules/pipe/schemas/pipeline.schema.json')
  })
})
