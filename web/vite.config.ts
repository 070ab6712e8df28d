import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The app is built into dist/app, which the Go binary embeds (web/embed.go). `make web-dev`
// serves it from Vite with /graphql proxied to a running `agentry dev`.
export default defineConfig({
  plugins: [react()],
  build: {
    outDir: 'dist/app',
    emptyOutDir: true,
    assetsDir: 'assets',
    sourcemap: false,
    chunkSizeWarningLimit: 900,
  },
  server: {
    port: 5173,
    proxy: {
      '/graphql': { target: process.env.AGENTRY_URL ?? 'http://127.0.0.1:8080', ws: true, changeOrigin: false },
    },
  },
  test: {
    include: ['src/**/*.test.ts'],
    environment: 'node',
  },
});
