// The ask waiter's executions, run by an ASL interpreter (aws-local-stepfunctions needs Node 22:
// Promise.withResolvers), in a Node 22 process of the box. Its Lambda tasks call the box's Lambda
// Invoke API with the state machine role's credentials, as Step Functions does. The box's clock
// reaches it by IPC: Wait states and retry pauses sleep on that clock.
// Plain JavaScript: it runs on the Node 22 binary, outside the test runner.
import { followBoxClock } from './wall-clock.mjs';

const realSetTimeout = globalThis.setTimeout;
const realClearTimeout = globalThis.clearTimeout;
const timers = new Set();
function arm(timer) {
  realClearTimeout(timer.real);
  timer.real = realSetTimeout(() => {
    if (Date.now() < timer.due) return arm(timer);
    forget(timer);
    timer.fn(...timer.args);
  }, Math.max(0, timer.due - Date.now()));
}
// The executions' waits of a second or more (Wait states, a task's retry interval), told to the
// box as they change: a test moves the clock to the next one once it is armed, not before.
function report() {
  process.send?.({ waits: [...timers].filter((timer) => timer.long).map((timer) => timer.due).sort((a, b) => a - b) });
}
function forget(timer) {
  timers.delete(timer);
  if (timer.long) report();
}
globalThis.setTimeout = (fn, ms = 0, ...args) => {
  const timer = { due: Date.now() + Number(ms), fn, args, real: undefined, long: Number(ms) >= 1_000 };
  timers.add(timer);
  arm(timer);
  if (timer.long) report();
  return timer;
};
globalThis.clearTimeout = (timer) => {
  if (timer && typeof timer === 'object' && timers.has(timer)) {
    realClearTimeout(timer.real);
    forget(timer);
  } else realClearTimeout(timer);
};

const { StateMachine } = await import('aws-local-stepfunctions');
const machines = new Map();
const running = new Map();

followBoxClock(() => {
  for (const timer of timers) arm(timer);
});
process.on('message', (message) => {
  if (message.start) start(message.start);
  if (message.stop) running.get(message.stop.id)?.abort();
});

function machine(definition) {
  let found = machines.get(definition);
  if (!found) {
    found = new StateMachine(JSON.parse(definition), {
      awsConfig: {
        region: process.env.AWS_REGION,
        credentials: { accessKeys: { accessKeyId: process.env.AWS_ACCESS_KEY_ID, secretAccessKey: process.env.AWS_SECRET_ACCESS_KEY } },
      },
    });
    machines.set(definition, found);
  }
  return found;
}

async function start({ id, definition, input, context }) {
  const execution = machine(definition).run(JSON.parse(input), { noThrowOnAbort: true, context });
  running.set(id, execution);
  // The log closes at the execution's end: its states are all told before the execution is done.
  const logged = (async () => {
    for await (const event of execution.eventLogs) {
      if (event.type === 'StateEntered') process.send({ state: { id, name: event.state.name } });
    }
  })().catch(() => {});
  try {
    const output = await execution.result;
    await logged;
    process.send({ done: { id, status: output === null && running.get(id)?.aborted ? 'ABORTED' : 'SUCCEEDED', output: JSON.stringify(output) } });
  } catch (error) {
    await logged;
    const aborted = error?.name === 'ExecutionAbortedError';
    process.send({ done: { id, status: aborted ? 'ABORTED' : 'FAILED', error: error?.name ?? 'Error', cause: String(error?.message ?? error) } });
  } finally {
    running.delete(id);
  }
}
process.send({ ready: true });
