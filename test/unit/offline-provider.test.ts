import {expect} from 'chai'
import {readFileSync} from 'node:fs'
import path from 'node:path'
import {parseGwt, parseStory, priorityOf} from '../../src/providers/offline/classify.js'
import {extractSpec} from '../../src/providers/offline/extract.js'
import {OfflineProvider} from '../../src/providers/offline/provider.js'
import {hanRatio, language} from '../../src/providers/offline/text.js'
import {examples} from '../helpers/cli.js'

const signal = new AbortController().signal
const read = (name: string): string => readFileSync(path.join(examples, name), 'utf8')

describe('offline rules provider', () => {
  it('extracts goal, prioritised features, constraints, NFRs and acceptance criteria from a Markdown PRD', () => {
    const {body, title} = extractSpec(read('full-prd.md'))
    expect(title).to.equal('Team Expense Tracker')
    expect(body.goal).to.match(/^Give small teams a shared place/)
    expect(body.features.map((f) => [f.id, f.priority])).to.deep.equal([
      ['FR-001', 'P0'],
      ['FR-002', 'P0'],
      ['FR-003', 'P0'],
      ['FR-004', 'P1'],
      ['FR-005', 'P1'],
      ['FR-006', 'P2'],
    ])
    expect(body.features[4]!.story).to.deep.equal({role: 'group owner', want: 'export all expenses as CSV', so_that: 'I can archive the trip'})
    expect(body.constraints.map((c) => c.text)).to.include('Out of scope: Currency conversion at live exchange rates.')
    expect(body.non_functional.map((n) => n.category)).to.deep.equal(['performance', 'security', 'reliability', 'usability'])
    expect(body.acceptance_criteria).to.have.length(4)
    expect(body.acceptance_criteria[2]).to.include({
      given: 'a group with 500 expenses',
      when: 'the owner exports them',
      then: 'the CSV has 500 rows and a header',
    })
    expect(body.open_questions[0]!.question).to.equal('Should members be able to leave a group with an unsettled balance?')
  })

  it('classifies loose sentences by their wording', () => {
    const text =
      'The system must send a receipt by email. Users should be able to undo a payment. It could show charts later. The app must not store card numbers. Pages must load within 200 ms.\n\nGiven a paid invoice, when the user opens it, then the status shows Paid.'
    const {body} = extractSpec(text)
    expect(body.features.map((f) => [f.title, f.priority])).to.deep.equal([
      ['The system must send a receipt by email.', 'P0'],
      ['Users should be able to undo a payment.', 'P1'],
      ['It could show charts later.', 'P2'],
    ])
    expect(body.constraints.map((c) => c.text)).to.deep.equal(['The app must not store card numbers.'])
    expect(body.non_functional.map((n) => [n.category, n.text])).to.deep.equal([['performance', 'Pages must load within 200 ms.']])
    expect(body.acceptance_criteria[0]).to.include({given: 'a paid invoice', when: 'the user opens it', then: 'the status shows Paid'})
  })

  it('reads Chinese requirements', () => {
    const {body} = extractSpec(read('zh-prd.md'))
    expect(body.features).to.have.length(5)
    expect(body.features.map((f) => f.priority)).to.deep.equal(['P0', 'P0', 'P1', 'P1', 'P2'])
    expect(body.constraints.map((c) => c.text)).to.include('不得存储员工的个人手机号码。')
    expect(parseGwt('假如用户已登录，当他点击退出时，那么会话结束。')).to.deep.equal({given: '用户已登录', when: '他点击退出时', then: '会话结束'})
    expect(parseStory('作为访客，我希望浏览商品，以便决定是否注册。')).to.deep.equal({role: '访客', want: '浏览商品', so_that: '决定是否注册'})
    expect(priorityOf('系统必须记录日志')).to.equal('P0')
    expect(priorityOf('可以支持导出')).to.equal('P2')
  })

  it('turns a single sentence into a goal and one P0 feature, and reports what is missing', async () => {
    const reply = await new OfflineProvider().compile({text: read('one-sentence.txt'), sourceRef: 'file://x', previous: null}, {signal, step: 'test'})
    expect(reply.value.body.features).to.have.length(1)
    expect(reply.value.body.features[0]!.priority).to.equal('P0')
    expect(reply.value.missing_fields).to.deep.equal(['acceptance_criteria'])
    expect(reply.citations.every((c) => read('one-sentence.txt').includes(c.excerpt))).to.equal(true)
  })

  it('asks one question per missing field, numbered after earlier rounds, in the spec language', async () => {
    const provider = new OfflineProvider()
    const {body} = extractSpec(read('zh-prd.md'))
    const reply = await provider.clarify(
      {spec: body, missing: [{path: 'acceptance_criteria'}, {path: 'constraints'}, {path: 'constraints'}], maxQuestions: 10, firstNumber: 4},
      {signal, step: 'test'},
    )
    expect(reply.value.questions.map((q) => [q.id, q.field])).to.deep.equal([
      ['Q-004', 'acceptance_criteria'],
      ['Q-005', 'constraints'],
    ])
    expect(reply.value.questions[0]!.question).to.match(/验收标准/)
  })

  it('applies answers to the fields they answer; a deferring answer changes nothing', async () => {
    const provider = new OfflineProvider()
    const {body} = extractSpec(read('one-sentence.txt'))
    const questions = [
      {id: 'Q-001', field: 'acceptance_criteria', question: 'How?'},
      {id: 'Q-002', field: 'constraints', question: 'Limits?'},
      {id: 'Q-003', field: 'non_functional', question: 'Qualities?'},
    ]
    const reply = await provider.applyAnswers(
      {spec: body, questions, answers: {'Q-001': '- Given a month, when exported, then a PDF exists\n- The PDF lists totals', 'Q-002': 'none', 'Q-003': 'TBD'}},
      {signal, step: 'test'},
    )
    const out = reply.value.body
    expect(out.acceptance_criteria.map((a) => a.text)).to.deep.equal(['Given a month, when exported, then a PDF exists', 'The PDF lists totals'])
    expect(out.acceptance_criteria[0]!.source).to.equal('answer:Q-001')
    expect(out.constraints).to.have.length(1)
    expect(out.non_functional).to.have.length(0)
    expect(out.open_questions.map((q) => [q.id, q.status])).to.deep.equal([
      ['Q-001', 'answered'],
      ['Q-002', 'answered'],
      ['Q-003', 'open'],
    ])
  })

  it('plans tasks in the seed task schema, linked to features and acceptance criteria', async () => {
    const provider = new OfflineProvider()
    const {body} = extractSpec(read('full-prd.md'))
    const {tasks} = (await provider.planTasks({spec: body}, {signal, step: 'test'})).value
    expect(tasks.map((t) => t.id)).to.deep.equal(['T-001', 'T-002', 'T-003', 'T-004', 'T-005', 'T-006', 'T-007'])
    expect(tasks.slice(0, 6).map((t) => t.priority)).to.deep.equal(['P0', 'P0', 'P0', 'P1', 'P1', 'P2'])
    const addExpense = tasks.find((t) => t.feature_ids?.includes('FR-002'))!
    expect(addExpense.acceptance_criteria).to.include('AC-001')
    expect(addExpense.acceptance_tests.expected_signals).to.include(body.acceptance_criteria[0]!.text)
    expect(addExpense.constraints.forbidden_actions).to.include('Must not store card numbers or bank details.')
    const verify = tasks.at(-1)!
    expect(verify.type).to.equal('add_test')
    expect(verify.acceptance_criteria).to.deep.equal(['AC-004'])
  })

  it('derives verification items per criterion and NFR, and validation per P0 feature', async () => {
    const provider = new OfflineProvider()
    const {body} = extractSpec(read('full-prd.md'))
    body.tasks = (await provider.planTasks({spec: body}, {signal, step: 'test'})).value.tasks
    const {vv} = (await provider.generateVv({spec: body}, {signal, step: 'test'})).value
    expect(vv.filter((v) => v.kind === 'verification' && v.acceptance_criteria.length === 1)).to.have.length(4)
    expect(vv.filter((v) => v.requirements?.[0]?.startsWith('NFR-'))).to.have.length(4)
    expect(vv.filter((v) => v.kind === 'validation')).to.have.length(3)
    for (const item of vv) for (const t of item.tasks) expect(body.tasks.map((x) => x.id)).to.include(t)
  })

  it('is deterministic', async () => {
    const text = read('full-prd.md')
    const a = await new OfflineProvider().compile({text, sourceRef: 'a', previous: null}, {signal, step: 'test'})
    const b = await new OfflineProvider().compile({text, sourceRef: 'a', previous: null}, {signal, step: 'test'})
    expect(JSON.stringify(a)).to.equal(JSON.stringify(b))
  })

  it('keeps answered items when compiling again (the clarify loop)', async () => {
    const provider = new OfflineProvider()
    const text = read('one-sentence.txt')
    const first = (await provider.compile({text, sourceRef: 'a', previous: null}, {signal, step: 'test'})).value.body
    first.acceptance_criteria.push({id: 'AC-001', text: 'A PDF is written', source: 'answer:Q-001'})
    const again = await provider.compile({text, sourceRef: 'a', previous: first}, {signal, step: 'test'})
    expect(again.value.body.acceptance_criteria.map((a) => a.text)).to.deep.equal(['A PDF is written'])
    expect(again.value.body.features).to.have.length(1)
    expect(again.value.missing_fields).to.deep.equal([])
  })

  it("tells an input's language by its share of Han letters, counting no radical or numeral as a letter", () => {
    expect(language(read('full-prd.md'))).to.equal('en')
    expect(language('团队报销工具：成员提交发票，经理审批。')).to.equal('zh')
    expect(language('Expense tracker 报销工具 for small teams')).to.equal('mixed')
    // Astral Han letters count once each, as the letters of the text do.
    expect(hanRatio('𠀀𠀁ab')).to.equal(0.5)
    // ⺀ is a Han radical (a symbol) and 〇 a number: no letters at all.
    expect(hanRatio('⺀〇 123 !')).to.equal(0)
    expect(hanRatio('〇a')).to.equal(0)
  })
})
