import { Role, type Message, type Part } from '@a2a-js/sdk';
import { describe, expect, it } from 'vitest';
import { answerInput, ordinaryInput } from '../../lambdas/core/a2a/inbound.js';
import type { Ask } from '../../lambdas/core/model.js';

const landing = { threadId: 't1', runId: 'r1', metadata: { from: 'test' } };

function message(...parts: Part[]): Message {
  return { messageId: 'm1', contextId: '', taskId: '', role: Role.ROLE_USER, parts, metadata: undefined, extensions: [], referenceTaskIds: [] };
}
const textPart = (value: string): Part => ({ content: { $case: 'text', value }, metadata: undefined, filename: '', mediaType: '' });
const dataPart = (value: unknown): Part => ({ content: { $case: 'data', value }, metadata: undefined, filename: '', mediaType: '' });
const interrupt = (id: string): Ask => ({ id, kind: 'interrupt', state: 'open', interrupt: { id, reason: 'confirmation' } });
const toolCall = (id: string): Ask => ({ id, kind: 'tool_call', state: 'open', toolCallId: id, toolCallName: 'confirm' });

describe('an A2A message as a RunAgentInput', () => {
  it('makes text parts the user message text and request metadata the forwardedProps', () => {
    const input = ordinaryInput(message(textPart('hello'), textPart('world')), landing);
    expect(input).toEqual({
      ok: true,
      value: {
        threadId: 't1',
        runId: 'r1',
        messages: [{ id: 'm1', role: 'user', content: 'hello\nworld' }],
        tools: [],
        context: [],
        forwardedProps: { from: 'test' },
      },
    });
  });

  it('makes file parts AG-UI content parts: bytes inline as base64, URLs as URLs', () => {
    const raw: Part = { content: { $case: 'raw', value: Buffer.from('%PDF') }, metadata: undefined, filename: 'a.pdf', mediaType: 'application/pdf' };
    const url: Part = { content: { $case: 'url', value: 'https://x/y.mp3' }, metadata: undefined, filename: '', mediaType: 'audio/mpeg' };
    const input = ordinaryInput(message(raw, url), landing);
    expect(input.ok && input.value.messages[0].content).toEqual([
      { type: 'document', source: { type: 'data', value: Buffer.from('%PDF').toString('base64'), mimeType: 'application/pdf' }, metadata: { filename: 'a.pdf' } },
      { type: 'audio', source: { type: 'url', value: 'https://x/y.mp3', mimeType: 'audio/mpeg' } },
    ]);
  });

  it('refuses a data part, and a file AG-UI has no part for, with content_type_not_supported', () => {
    expect(ordinaryInput(message(dataPart({ a: 1 })), landing)).toMatchObject({ ok: false, code: 'content_type_not_supported' });
    const zip: Part = { content: { $case: 'url', value: 'https://x/y.zip' }, metadata: undefined, filename: '', mediaType: 'application/zip' };
    expect(ordinaryInput(message(zip), landing)).toMatchObject({ ok: false, code: 'content_type_not_supported' });
    expect(ordinaryInput(message(), landing)).toMatchObject({ ok: false, code: 'invalid_input' });
  });

  it('answers one interrupt with a text reply: the text is the payload', () => {
    const input = answerInput(message(textPart('yes')), [interrupt('i1')], landing);
    expect(input.ok && input.value.resume).toEqual([{ interruptId: 'i1', status: 'resolved', payload: 'yes' }]);
    expect(input.ok && input.value.messages).toEqual([]);
  });

  it('answers every open ask at once: data for each interrupt, and a tool message for each tool call', () => {
    const input = answerInput(message(dataPart({ approved: true })), [interrupt('i1'), interrupt('i2'), toolCall('c1')], landing);
    expect(input.ok && input.value.resume).toEqual([
      { interruptId: 'i1', status: 'resolved', payload: { approved: true } },
      { interruptId: 'i2', status: 'resolved', payload: { approved: true } },
    ]);
    expect(input.ok && input.value.messages).toEqual([{ id: 'm1:c1', role: 'tool', toolCallId: 'c1', content: '{"approved":true}' }]);
  });

  it('gives each ask its own answer when the data is keyed by every ask id', () => {
    const input = answerInput(message(dataPart({ i1: 'first', c1: 'second' })), [interrupt('i1'), toolCall('c1')], landing);
    expect(input.ok && input.value.resume).toEqual([{ interruptId: 'i1', status: 'resolved', payload: 'first' }]);
    expect(input.ok && input.value.messages).toMatchObject([{ toolCallId: 'c1', content: 'second' }]);
  });

  it('refuses a file as an answer', () => {
    const file: Part = { content: { $case: 'url', value: 'https://x/y.png' }, metadata: undefined, filename: '', mediaType: 'image/png' };
    expect(answerInput(message(file), [interrupt('i1')], landing)).toMatchObject({ ok: false, code: 'content_type_not_supported' });
  });
});
