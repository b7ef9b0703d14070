// The bundle lands in the Python package (src/buzz/web_dist) so the relay serves it without
// Node.js. Flat, content-hashed names under /app/ (the relay's immutable-cache route); no
// inline scripts or styles, so the page runs under the relay's strict CSP.
import { defineConfig } from 'vite'

export default defineConfig({
  base: '/app/',
  esbuild: { jsx: 'automatic', jsxImportSource: 'preact' },
  build: {
    outDir: '../src/buzz/web_dist',
    emptyOutDir: true,
    assetsDir: '',
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: 'es2022',
    reportCompressedSize: true,
    rollupOptions: {
      output: {
        entryFileNames: '[name]-[hash].js',
        chunkFileNames: '[name]-[hash].js',
        assetFileNames: '[name]-[hash][extname]',
      },
    },
  },
})
