/**
 * A Lambda function name, a partial or full ARN (Lambda's `FunctionName`: name,
 * `123456789012:function:name`, or `arn:aws:lambda:region:account:function:name`), without a
 * qualifier or a wildcard: what an agent definition of the `lambda` kind names, and what the
 * stack may let the dispatcher invoke (never more than the functions named).
 */
export const FUNCTION_NAME = /^(arn:aws[a-zA-Z-]*:lambda:[a-z0-9-]+:\d{12}:function:|\d{12}:function:)?[a-zA-Z0-9_-]{1,140}$/;
/** A version number or an alias name. */
export const QUALIFIER = /^(\$LATEST|\d{1,10}|[a-zA-Z0-9_-]{1,128})$/;
