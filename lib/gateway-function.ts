import { fileURLToPath } from 'node:url';
import { Duration, RemovalPolicy } from 'aws-cdk-lib';
import * as cloudwatch from 'aws-cdk-lib/aws-cloudwatch';
import * as lambda from 'aws-cdk-lib/aws-lambda';
import { NodejsFunction, OutputFormat } from 'aws-cdk-lib/aws-lambda-nodejs';
import * as logs from 'aws-cdk-lib/aws-logs';
import { Construct } from 'constructs';
import { ALARM_PERIOD, alarmOnAny } from './alarm.js';

const PROJECT_ROOT = fileURLToPath(new URL('../', import.meta.url));

/** The Lambda entry points under `lambdas/handlers/`, one per function. */
export type HandlerName = 'doors' | 'doors-stream' | 'dispatcher' | 'ask-expirer' | 'stream-handler' | 'dead-letters' | 'repair' | 'sweep' | 'link' | 'link-timer';

export interface GatewayFunctionProps {
  handler: HandlerName;
  description: string;
  timeout: Duration;
  memorySize?: number;
  environment?: Record<string, string>;
  logRetention: logs.RetentionDays;
  reservedConcurrentExecutions?: number;
  /** The AWS Parameters and Secrets extension, for a function that reads a secret. */
  paramsAndSecrets?: lambda.ParamsAndSecretsLayerVersion;
}

/**
 * One of the gateway's Lambda functions: Node.js 22 on arm64, bundled by esbuild as ESM, with
 * Powertools configured, a log group with the stack's retention, and an alarm on its errors.
 */
export class GatewayFunction extends Construct {
  readonly function: NodejsFunction;
  readonly errorsAlarm: cloudwatch.Alarm;

  constructor(scope: Construct, id: string, props: GatewayFunctionProps) {
    super(scope, id);
    const logGroup = new logs.LogGroup(this, 'Logs', {
      retention: props.logRetention,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    this.function = new NodejsFunction(this, 'Function', {
      entry: `${PROJECT_ROOT}lambdas/handlers/${props.handler}.ts`,
      projectRoot: PROJECT_ROOT,
      depsLockFilePath: `${PROJECT_ROOT}package-lock.json`,
      handler: 'handler',
      description: props.description,
      runtime: lambda.Runtime.NODEJS_22_X,
      architecture: lambda.Architecture.ARM_64,
      timeout: props.timeout,
      // The doors mostly hold streams open while waiting on the record: memory, not CPU, is billed.
      memorySize: props.memorySize ?? 256,
      reservedConcurrentExecutions: props.reservedConcurrentExecutions,
      paramsAndSecrets: props.paramsAndSecrets,
      loggingFormat: lambda.LoggingFormat.JSON,
      logGroup,
      // No --enable-source-maps and no source map: it adds 20–50 ms to a cold start's import and ~20 MB.
      environment: {
        POWERTOOLS_SERVICE_NAME: 'funduq',
        POWERTOOLS_METRICS_NAMESPACE: 'funduq',
        POWERTOOLS_LOG_LEVEL: 'INFO',
        FUNDUQ_FUNCTION: props.handler,
        ...props.environment,
      },
      bundling: {
        format: OutputFormat.ESM,
        target: 'node22',
        mainFields: ['module', 'main'],
        minify: true,
        sourceMap: false,
        // The SDK clients are pinned in package-lock.json; bundling them keeps the runtime's own copy out of the picture.
        bundleAwsSDK: true,
        externalModules: [],
        // Some CommonJS dependencies call `require` at run time, which an ESM bundle lacks.
        banner: "import { createRequire as __funduqCreateRequire } from 'node:module'; const require = __funduqCreateRequire(import.meta.url);",
      },
    });
    this.errorsAlarm = alarmOnAny(
      this,
      'ErrorsAlarm',
      `funduq ${props.handler}: the function reported errors`,
      this.function.metricErrors({ period: ALARM_PERIOD, statistic: cloudwatch.Stats.SUM }),
    );
  }
}
