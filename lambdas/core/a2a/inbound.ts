import type { Message, Part } from '@a2a-js/sdk';
import type { ContentPart, ResumeEntry, RunAgentInput, ToolMessage, UserMessage } from '@ag-ui/core';
import { ok, refuse, type Result } from '../errors.js';
import type { Ask } from '../model.js';

/** Where an A2A message lands: the thread and the new run, and the request's metadata. */
export interface Landing {
  threadId: string;
  runId: string;
  /** The A2A request's `metadata`, which becomes the run's `forwardedProps`. */
  metadata?: Record<string, unknown>;
}

/** Media types AG-UI 1.0 carries as a document part, beside its image, audio and video parts. */
const DOCUMENT_TYPES = /^(text\/[\w.+-]+|application\/(pdf|json|xml|rtf|msword|vnd\.openxmlformats-officedocument\.[\w.+-]+|vnd\.oasis\.opendocument\.[\w.+-]+))$/i;

/** An A2A message that starts a task: its parts become the user message of a new run. */
export function ordinaryInput(message: Message, landing: Landing): Result<RunAgentInput> {
  const content = userContent(message.parts);
  if (!content.ok) return content;
  const user: UserMessage = { id: message.messageId, role: 'user', content: content.value };
  if (message.metadata !== undefined) user.metadata = message.metadata;
  return ok(input(landing, [user]));
}

/**
 * A reply to a task that waits: it answers every open ask at once. Its data (or, with none, its
 * text) becomes the payload of a `resume[]` entry for each open interrupt and the content of a
 * tool message for each open tool call. A data object keyed by every ask's id answers each ask
 * with its own value.
 */
export function answerInput(message: Message, open: readonly Ask[], landing: Landing): Result<RunAgentInput> {
  const reply = replyOf(message.parts);
  if (!reply.ok) return reply;
  const { text, data } = reply.value;
  const keyed =
    isPlainObject(data) && open.every((ask) => ask.id in data || (ask.toolCallId !== undefined && ask.toolCallId in data));
  const payloadFor = (ask: Ask): unknown => {
    if (keyed) return ask.id in data ? data[ask.id] : data[ask.toolCallId!];
    return data !== undefined ? data : text;
  };
  const resume: ResumeEntry[] = open
    .filter((ask) => ask.kind === 'interrupt')
    .map((ask) => ({ interruptId: ask.id, status: 'resolved', payload: payloadFor(ask) }));
  const results: ToolMessage[] = open
    .filter((ask) => ask.kind === 'tool_call' && ask.toolCallId !== undefined)
    .map((ask) => {
      const payload = payloadFor(ask);
      return {
        id: `${message.messageId}:${ask.toolCallId}`,
        role: 'tool',
        toolCallId: ask.toolCallId!,
        content: typeof payload === 'string' ? payload : JSON.stringify(payload ?? null),
      };
    });
  const answer = input(landing, results);
  if (resume.length > 0) answer.resume = resume;
  return ok(answer);
}

function input(landing: Landing, messages: RunAgentInput['messages']): RunAgentInput {
  return {
    threadId: landing.threadId,
    runId: landing.runId,
    messages,
    tools: [],
    context: [],
    forwardedProps: landing.metadata ?? {},
  };
}

function userContent(parts: readonly Part[]): Result<string | ContentPart[]> {
  if (parts.length === 0) return refuse('invalid_input', 'message.parts is empty: a message needs at least one part');
  const converted: ContentPart[] = [];
  for (const [index, part] of parts.entries()) {
    const one = contentPart(part, index);
    if (!one.ok) return one;
    converted.push(one.value);
  }
  if (converted.every((part) => part.type === 'text')) return ok(converted.map((part) => (part as { text: string }).text).join('\n'));
  return ok(converted);
}

function contentPart(part: Part, index: number): Result<ContentPart> {
  const content = part.content;
  if (!content) {
    // What @a2a-js/sdk 1.x sends of a part written the 0.3 way ({ text }): its encoder drops it whole.
    return refuse(
      'invalid_input',
      `message.parts[${index}] has no text, raw, url or data (with @a2a-js/sdk 1.x a text part is { content: { $case: 'text', value } })`,
    );
  }
  if (content.$case === 'text') return ok({ type: 'text', text: content.value });
  if (content.$case === 'data') {
    return refuse(
      'content_type_not_supported',
      `message.parts[${index}] is a data part: AG-UI 1.0 has no content part for structured data (a data part can answer an open ask)`,
    );
  }
  const mediaType = part.mediaType.trim().toLowerCase();
  const kind = mediaKind(mediaType);
  if (!kind) {
    return refuse(
      'content_type_not_supported',
      `message.parts[${index}] is a file of media type "${part.mediaType || 'unknown'}": AG-UI 1.0 carries images, audio, video and documents (text, PDF, office formats) with a media type`,
    );
  }
  const source =
    content.$case === 'raw'
      ? ({ type: 'data', value: base64(content.value), mimeType: mediaType } as const)
      : ({ type: 'url', value: content.value, mimeType: mediaType } as const);
  return ok({ type: kind, source, ...(part.filename ? { metadata: { filename: part.filename } } : {}) });
}

function mediaKind(mediaType: string): 'image' | 'audio' | 'video' | 'document' | undefined {
  const [type] = mediaType.split(';');
  if (/^image\/[\w.+-]+$/.test(type)) return 'image';
  if (/^audio\/[\w.+-]+$/.test(type)) return 'audio';
  if (/^video\/[\w.+-]+$/.test(type)) return 'video';
  if (DOCUMENT_TYPES.test(type)) return 'document';
  return undefined;
}

function replyOf(parts: readonly Part[]): Result<{ text?: string; data?: unknown }> {
  const texts: string[] = [];
  const data: unknown[] = [];
  for (const [index, part] of parts.entries()) {
    if (part.content?.$case === 'text') texts.push(part.content.value);
    else if (part.content?.$case === 'data') data.push(part.content.value);
    else {
      return refuse(
        'content_type_not_supported',
        `message.parts[${index}]: an answer to open asks is text or data, not a file`,
      );
    }
  }
  if (texts.length === 0 && data.length === 0) return refuse('invalid_input', 'the answer has no text or data part');
  return ok({
    ...(texts.length > 0 ? { text: texts.join('\n') } : {}),
    ...(data.length > 0 ? { data: data.length === 1 ? data[0] : data } : {}),
  });
}

/** Base64 without Node's Buffer: the core runs on web-standard globals only. */
function base64(bytes: Uint8Array): string {
  let binary = '';
  // Chunks keep String.fromCharCode's argument list well under engines' limits.
  for (let i = 0; i < bytes.length; i += 0x8000) binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  return btoa(binary);
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
