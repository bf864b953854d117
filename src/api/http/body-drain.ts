import type { IncomingMessage } from 'node:http';
import { LIMITS } from '../../domain/limits';

/**
 * A client whose body we refuse (too large, not JSON, bad token) usually goes on writing until it
 * has sent all of it, and only then reads the answer. Closing the connection under it makes it
 * see a reset (EPIPE, ECONNRESET) instead of our error. So the rest of the body is read and
 * thrown away before the error is sent, up to LIMITS.refusedBodyDrainBytes; past that the
 * connection is cut.
 *
 * Reads and discards what is left of the request body. True once all of it has arrived (the
 * connection may carry on); false when it was declared or found too large, stalled, or the
 * client went away: the answer must then close the connection.
 */
export function drainRequestBody(req: IncomingMessage): Promise<boolean> {
  if (req.complete) return Promise.resolve(true);
  if (req.destroyed || Number(req.headers['content-length']) > LIMITS.refusedBodyDrainBytes)
    return Promise.resolve(false);
  return new Promise((resolve) => {
    let seen = 0;
    const finish = (drained: boolean): void => {
      clearTimeout(timer);
      req.off('data', onData).off('end', onEnd).off('close', onClose);
      resolve(drained);
    };
    const onData = (chunk: Buffer): void => {
      seen += chunk.length;
      if (seen > LIMITS.refusedBodyDrainBytes) finish(false);
    };
    const onEnd = (): void => finish(true);
    const onClose = (): void => finish(req.complete);
    const timer = setTimeout(() => finish(false), LIMITS.refusedBodyDrainMs);
    req.on('data', onData).once('end', onEnd).once('close', onClose);
    req.resume();
  });
}
