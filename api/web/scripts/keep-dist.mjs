// vite empties dist/ on every build; dist/.gitkeep is what lets `go build` embed the
// directory (api/web/embed.go) on a checkout where the app was never built.
import { writeFileSync } from 'node:fs';
writeFileSync(new URL('../dist/.gitkeep', import.meta.url), '');
