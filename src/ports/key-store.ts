/** The installation's secret key material, the same for every process of the installation. */
export interface KeyStore {
  /**
   * The key that derives browse tokens (HMAC). Made on first use by whichever process asks
   * first; every other process, on any host, reads the same key.
   */
  serverKey(): Promise<Buffer>;
}
