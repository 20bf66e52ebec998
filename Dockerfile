# GRPO Playground: build the static app with Node, serve it with nginx.
#   docker build -t grpo-playground . && docker run --rm -p 8080:8080 grpo-playground
# then open http://localhost:8080 (localhost is a secure context, so WebGPU is available).

FROM node:20-bookworm-slim AS build
WORKDIR /app
# Dependencies first so the layer is cached across source edits. .npmrc skips onnxruntime-node's
# download of extra binaries (the browser app does not use it).
COPY package.json package-lock.json .npmrc ./
RUN npm ci --no-audit --no-fund
COPY . .
RUN npm run build

FROM nginx:1.27-alpine AS serve
COPY deploy/nginx/default.conf /etc/nginx/conf.d/default.conf
COPY deploy/nginx/grpo-headers.conf /etc/nginx/snippets/grpo-headers.conf
COPY --from=build /app/dist /usr/share/nginx/html
EXPOSE 8080
# The same config is exercised without Docker by tests/e2e/nginx.spec.ts.
HEALTHCHECK --interval=30s --timeout=3s CMD wget -qO- http://127.0.0.1:8080/ >/dev/null || exit 1
