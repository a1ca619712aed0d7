import { defineConfig } from 'vite';
import { svelte } from '@sveltejs/vite-plugin-svelte';

// The dashboard is served by oikos-api from the embedded dist/ (api/web/embed.go). In
// development `npm run dev` serves it on :5173 and proxies the api, so the session cookie
// stays same-origin. Hashed files land in dist/assets/, which the api serves as immutable.
export default defineConfig({
  plugins: [svelte()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    assetsDir: 'assets',
    target: 'es2022',
    sourcemap: false,
    chunkSizeWarningLimit: 600,
  },
  server: {
    proxy: {
      '/api': { target: process.env.OIKOS_API_URL ?? 'http://127.0.0.1:8080', changeOrigin: false },
    },
  },
});
