/** DELETE content's body: the contract's `{ ids }`, or the original vendor's `{ content: [{ id }] }`. */
export const deleteIds = (
  body: { ids: string[] } | { content: Array<{ id: string }> },
): string[] => ('ids' in body ? body.ids : body.content.map((c) => c.id));
