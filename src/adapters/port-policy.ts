import type { AppError } from '../domain/errors';

/** What every call of one port goes through (ARCHITECTURE: cross-cutting policy, applied once). */
export interface PortPolicy {
  /**
   * The engine's classifier: the 503 (with Retry-After) that an outage of the engine is answered
   * with, or undefined for any other error, which passes unchanged.
   */
  classify(e: unknown): AppError | undefined;
  /** Starts timing one call of `operation` (the method's name); the returned function ends it. */
  time?(operation: string): () => void;
}

type Method = (...args: unknown[]) => unknown;

const isThenable = (x: unknown): x is PromiseLike<unknown> =>
  typeof (x as PromiseLike<unknown> | null)?.then === 'function';

/**
 * The same port with `policy` around every method: an error the classifier recognises as an
 * outage becomes its AppError, any other passes unchanged, and a call that returns a promise is
 * timed until it settles. A synchronous throw is answered as a rejection, as from an async
 * method (port methods return promises).
 *
 * The methods are own properties of an object whose prototype is the adapter, so everything else
 * reads through (`constructor.name`, getters), a test can still replace one (jest.spyOn), and the
 * adapter's calls to its own methods are not wrapped again. A property assigned through the port
 * (the queue's `onRecovered`) reaches the adapter.
 */
export function withPolicy<T extends object>(port: T, policy: PortPolicy): T {
  const target = port as Record<string, unknown>;
  const wrapped = Object.create(port) as Record<string, unknown>;
  for (let proto: object | null = port; proto && proto !== Object.prototype;) {
    for (const name of Object.getOwnPropertyNames(proto)) {
      if (name === 'constructor' || Object.hasOwn(wrapped, name)) continue;
      const d = Object.getOwnPropertyDescriptor(proto, name)!;
      if (typeof d.value === 'function') {
        wrapped[name] = call(target, name, policy);
      } else if (proto === port && 'value' in d) {
        Object.defineProperty(wrapped, name, {
          get: () => target[name],
          set: (v: unknown) => {
            target[name] = v;
          },
        });
      }
    }
    proto = Object.getPrototypeOf(proto) as object | null;
  }
  return wrapped as T;
}

function call(target: Record<string, unknown>, name: string, policy: PortPolicy): Method {
  const fail = (e: unknown) => policy.classify(e) ?? e;
  return (...args) => {
    // started before the call: the embedded adapters do their work synchronously inside it
    const end = policy.time?.(name);
    let result: unknown;
    try {
      result = (target[name] as Method).apply(target, args);
    } catch (e) {
      end?.();
      return Promise.reject(fail(e));
    }
    if (!isThenable(result)) return result;
    return Promise.resolve(result).then(
      (value) => {
        end?.();
        return value;
      },
      (e: unknown) => {
        end?.();
        throw fail(e);
      },
    );
  };
}

/** Where a port's calls are timed, by port name (Metrics.portTimer). */
export interface PortTimers {
  portTimer(port: string): (operation: string) => () => void;
}

/**
 * The policy of one engine, for each of its ports: the engine's classifier, and timings under the
 * port's name when `timers` are given (the composition root gives the process's metrics).
 */
export function enginePolicy(
  classify: PortPolicy['classify'],
  timers?: PortTimers,
): <T extends object>(port: string, adapter: T) => T {
  return (port, adapter) =>
    withPolicy(adapter, { classify, ...(timers ? { time: timers.portTimer(port) } : {}) });
}
