/** Downloads an image under the safety rules of contract §4; failures are `ImageError`s. */
export interface ImageFetcher {
  fetch(url: string): Promise<Uint8Array>;
}
