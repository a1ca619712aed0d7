import { defineConfig, mergeConfig } from 'vitest/config';
import viteConfig from './vite.config.ts';

// Unit tests for the dashboard's client-side logic (src/**/*.test.ts), run by
// `npm test` (scripts/test-web.sh). jsdom gives DOMPurify the DOM it sanitizes with; the
// svelte plugin from vite.config.ts compiles the .svelte.ts modules some of them import.
export default mergeConfig(
  viteConfig,
  defineConfig({
    test: {
      environment: 'jsdom',
      include: ['src/**/*.test.ts'],
      restoreMocks: true,
      unstubGlobals: true,
      // The machine may be busy (the first import of a module compiles it): generous, not flaky.
      testTimeout: 30_000,
    },
  }),
);
