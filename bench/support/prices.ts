/**
 * AWS on-demand list prices, us-east-1, as the author knows them (they are written into
 * bench/results.json with this date; check https://aws.amazon.com/pricing before quoting them).
 * Free tiers are left out: the model prices usage at the margin.
 */
export const PRICES = {
  region: 'us-east-1',
  asOf: '2025-06-01',
  source: 'AWS public price pages as known to the author on that date (not fetched by the harness)',
  dynamodb: {
    /** On-demand, Standard table class, since the 2024-11-01 price cut. */
    perMillionWriteRequestUnits: 0.625,
    perMillionReadRequestUnits: 0.125,
  },
  lambda: {
    /** arm64, first 7.5 billion GB-s a month. */
    perGbSecondArm64: 0.0000133334,
    perGbSecondX86: 0.0000166667,
    perMillionRequests: 0.2,
  },
  sqs: {
    /** FIFO queues; every 64 KB chunk of a payload is one request. */
    perMillionFifoRequests: 0.5,
  },
  apiGateway: {
    /** REST APIs, first 333 million requests a month. */
    perMillionRestRequests: 3.5,
  },
} as const;
