// A model server for the dsh app's `llm-deepseek` adapter (pointed here by
// DEEPSEEK_BASE_URL): `POST /chat/completions`, answered as an
// OpenAI-compatible server streams (server-sent `chat.completion.chunk`s,
// then `data: [DONE]`). Each request is answered by what it is:
// - no tools offered (the app's session-title request): a short title;
// - the last message a tool result: the final answer quoting it, streamed
//   word by word — or, when the prompt that started the turn says
//   `[hang]`, three words and then nothing more (the stream stays open),
//   so the app can be killed mid-stream;
// - otherwise (a new prompt): a sentence, then one `bash` tool call
//   running `echo hi`, its arguments in two fragments.
import { createServer } from 'node:http'

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms))

/** Starts the server on a free loopback port. */
export async function startFakeModel() {
  const requests = []
  const hanging = new Set()
  let onHang
  const hung = new Promise((resolve) => { onHang = resolve })

  async function answer(req, res, body) {
    const n = requests.length + 1
    const messages = Array.isArray(body.messages) ? body.messages : []
    const last = messages.at(-1)
    const prompt = messages.findLast((m) => m.role === 'user' && !String(textOf(m)).startsWith('Current runtime context'))
    const kind = !(body.tools?.length > 0) ? 'title' : last?.role === 'tool' ? 'final' : 'tool-call'
    requests.push({ n, kind, session: req.headers['x-deepseek-harness-session-id'], messages: messages.length })
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    const id = `chatcmpl-fake-${n}`
    const send = async (delta, finish = null) => {
      const usage = finish ? { usage: { prompt_tokens: 100, completion_tokens: 10, total_tokens: 110 } } : {}
      res.write(`data: ${JSON.stringify({
        id, object: 'chat.completion.chunk', created: 1796600000, model: body.model ?? 'fake',
        choices: [{ index: 0, delta, finish_reason: finish }], ...usage,
      })}\n\n`)
      await sleep(5)
    }
    const words = (text) => text.match(/\S+\s*/g)
    await send({ role: 'assistant', content: '' })
    if (kind === 'title') {
      for (const w of words('Saying hi with bash')) await send({ content: w })
      await send({}, 'stop')
    } else if (kind === 'tool-call') {
      for (const w of words('I will run a command to check. ')) await send({ content: w })
      const args = JSON.stringify({ command: 'echo hi', description: 'Print hi' })
      await send({ tool_calls: [{ index: 0, id: `call_fake_${n}`, type: 'function', function: { name: 'bash', arguments: '' } }] })
      await send({ tool_calls: [{ index: 0, function: { arguments: args.slice(0, 12) } }] })
      await send({ tool_calls: [{ index: 0, function: { arguments: args.slice(12) } }] })
      await send({}, 'tool_calls')
    } else {
      const output = typeof last.content === 'string' ? last.content.trim() : JSON.stringify(last.content)
      const text = words(`The command finished. Its output was: ${output} . Done.`)
      if (String(textOf(prompt)).includes('[hang]')) {
        for (const w of text.slice(0, 3)) await send({ content: w })
        hanging.add(res)
        onHang(n)
        return // the stream stays open until the app dies
      }
      for (const w of text) await send({ content: w })
      await send({}, 'stop')
    }
    res.end('data: [DONE]\n\n')
  }

  const server = createServer((req, res) => {
    if (req.method !== 'POST' || !/\/chat\/completions$/.test(req.url ?? '')) {
      res.writeHead(404).end()
      return
    }
    const chunks = []
    req.on('data', (c) => chunks.push(c))
    req.on('end', () => {
      answer(req, res, JSON.parse(Buffer.concat(chunks).toString('utf8'))).catch(() => res.destroy())
    })
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  return {
    url: `http://127.0.0.1:${server.address().port}`,
    requests,
    /** Resolves with the request number once a `[hang]` answer has stalled. */
    hung,
    close: () => {
      for (const res of hanging) res.destroy()
      server.closeAllConnections()
      return new Promise((resolve) => server.close(resolve))
    },
  }
}

/** A chat message's text, whether its content is a string or parts. */
function textOf(message) {
  if (message === undefined) return ''
  if (typeof message.content === 'string') return message.content
  return (message.content ?? []).map((part) => part.text ?? '').join('')
}
