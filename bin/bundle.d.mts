/** The bundle of `entry` (a path from the project's root), built first when it is missing or older than a source. */
export function bundled(entry: string): Promise<string>;
