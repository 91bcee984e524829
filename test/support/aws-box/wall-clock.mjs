// The box's wall clock inside one of its Node 22 processes: `Date` reads the machine's time plus
// the offset the box has advanced by (it sends each new offset by IPC, and with each invocation).
const RealDate = Date;
let offset = Number(process.env._BOX_CLOCK_OFFSET ?? 0);

class BoxDate extends RealDate {
  constructor(...args) {
    if (args.length === 0) super(RealDate.now() + offset);
    else super(...args);
  }
  static now() {
    return RealDate.now() + offset;
  }
}
globalThis.Date = BoxDate;

/** Calls `onAdvance` after each move of the clock. */
export function followBoxClock(onAdvance = () => {}) {
  process.on('message', (message) => {
    if (typeof message?.clockOffset !== 'number') return;
    moveBoxClock(message.clockOffset);
    onAdvance();
  });
}

/** Moves the clock to `to` (an offset from the machine's time); the box's clock never goes back, whichever way a move came first. */
export function moveBoxClock(to) {
  if (Number.isFinite(to)) offset = Math.max(offset, to);
}
