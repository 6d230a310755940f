import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/', '**/node_modules/', 'test/support/mongo-java-server/target/', 'coverage/', 'dist/', 'dist.*/', '**/dist/', 'test-results/', 'vendor/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  { files: ['bin/**/*.js', 'packages/create-svc/**/*.js'], languageOptions: { globals: { process: 'readonly', URL: 'readonly', fetch: 'readonly', setTimeout: 'readonly' } } },
  { files: ['bench/**/*.mjs'], languageOptions: { globals: { process: 'readonly', setInterval: 'readonly', URL: 'readonly' } } },
  // The deployment suite's static frontend runs in the browser.
  {
    files: ['test/deploy/frontend/**/*.js'],
    languageOptions: { globals: { window: 'readonly', document: 'readonly', location: 'readonly', history: 'readonly', fetch: 'readonly', URL: 'readonly' } },
  },
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
    },
  },
);
