import type { Core } from '../deps.js';
import { ok, refuse, type Refusal, type Result } from '../errors.js';
import { callerIdProblem, type Principal, type PushConfig } from '../model.js';
import { isoNow } from '../time.js';
import { findTask, type A2aCore, type Caller } from './deps.js';

/** A push target as a caller gives it (A2A `TaskPushNotificationConfig` less the task). */
export interface PushTarget {
  configId?: string;
  url: string;
  token?: string;
  authentication?: { scheme: string; credentials?: string };
}

/** Why a push target is refused, if it is: this gateway sends no pushes, or the sender will not send to it. */
export async function vetTarget(core: A2aCore, url: string): Promise<Refusal | undefined> {
  const { push } = core.a2a;
  if (!push) return refuse('invalid_input', 'this gateway sends no push notifications');
  try {
    new URL(url);
  } catch {
    return refuse('invalid_input', `push notification url "${url}" is not a URL`);
  }
  const why = await push.vet(url);
  return why === undefined ? undefined : refuse('invalid_input', `push notification url refused: ${why}`);
}

/** Stores a vetted target as a config of the task. */
export async function putPushConfig(core: Core, taskId: string, principal: Principal, target: PushTarget): Promise<PushConfig> {
  const { store } = core;
  const config: PushConfig = {
    taskId,
    configId: target.configId || core.ids.newId(),
    tenant: principal.tenant,
    url: target.url,
    createdAt: isoNow(core),
  };
  if (target.token) config.token = target.token;
  if (target.authentication?.scheme) config.authentication = target.authentication;
  await store.pushConfigs.put(config);
  return config;
}

export async function createPushConfig(core: A2aCore, caller: Caller, taskId: string, target: PushTarget): Promise<Result<PushConfig>> {
  const found = await findTask(core, caller, taskId);
  if (!found.ok) return found;
  const badId = target.configId ? callerIdProblem('id', target.configId) : undefined;
  if (badId) return refuse('invalid_input', badId);
  const vetted = await vetTarget(core, target.url);
  if (vetted) return vetted;
  return ok(await putPushConfig(core, found.value.runId, caller.principal, target));
}

export async function getPushConfig(core: Core, caller: Caller, taskId: string, configId: string): Promise<Result<PushConfig>> {
  const { store } = core;
  const found = await findTask(core, caller, taskId);
  if (!found.ok) return found;
  const config = await store.pushConfigs.get(taskId, configId);
  return config ? ok(config) : refuse('push_config_not_found', `task "${taskId}" has no push notification config "${configId}"`);
}

export async function listPushConfigs(core: Core, caller: Caller, taskId: string): Promise<Result<PushConfig[]>> {
  const { store } = core;
  const found = await findTask(core, caller, taskId);
  return found.ok ? ok(await store.pushConfigs.list(taskId)) : found;
}

export async function deletePushConfig(core: Core, caller: Caller, taskId: string, configId: string): Promise<Result<void>> {
  const { store } = core;
  const found = await findTask(core, caller, taskId);
  if (!found.ok) return found;
  return (await store.pushConfigs.delete(taskId, configId))
    ? ok(undefined)
    : refuse('push_config_not_found', `task "${taskId}" has no push notification config "${configId}"`);
}
