# The service image used by docker-compose.yml (api and worker roles run the same image).
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
COPY scripts/build-web.mjs ./scripts/
RUN npm run build && npm prune --omit=dev

FROM node:20-bookworm-slim
# glibc gives freed image-decoder memory back at once (bench/results/memory.json)
ENV NODE_ENV=production DATA_DIR=/data MALLOC_TRIM_THRESHOLD_=131072
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
# the default embedder's model, checked against SHA256 at start; Apache-2.0 §4 wants its licence
# and the "modified" notice (README.md) to travel with every copy of it, this image included
COPY models/efficientnet-lite0/efficientnet-lite0.onnx \
     models/efficientnet-lite0/efficientnet-lite0-int8.onnx models/efficientnet-lite0/SHA256 \
     models/efficientnet-lite0/LICENSE models/efficientnet-lite0/README.md ./models/efficientnet-lite0/
RUN mkdir -p /data && chown node:node /data
USER node
VOLUME /data
EXPOSE 4000
CMD ["node", "dist/main.js"]
