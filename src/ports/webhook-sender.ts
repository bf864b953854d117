/** How one delivery attempt ended. */
export type SendOutcome =
  | { status: number; retryAfter?: string }
  | {
      error: 'timeout' | 'forbidden_address' | 'connection';
      message: string;
    };

/**
 * Sends one webhook request under the image-fetch address rules (contract §9, §17): the name
 * is resolved for every attempt and each address judged before connecting; redirects are
 * answers, never followed.
 */
export interface WebhookSender {
  /** Why `url` may not be registered (an address refused, a name that does not resolve), or undefined. */
  checkDestination(url: string): Promise<string | undefined>;
  send(
    url: string,
    headers: Record<string, string>,
    body: string,
    timeoutMs: number,
  ): Promise<SendOutcome>;
  close(): Promise<void>;
}
