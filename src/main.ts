// Browser entry: mounts the Svelte app and, in production builds, registers the service worker
// that precaches the app, its wasm and the bundled model so later visits work offline.
import { mount } from 'svelte';
import App from './app/App.svelte';
import './app/global.css';

const target = document.getElementById('app');
if (!target) throw new Error('index.html has no #app element');
mount(App, { target });

if (import.meta.env.PROD && 'serviceWorker' in navigator) {
  navigator.serviceWorker.register('/sw.js', { scope: '/' }).catch((err: unknown) => {
    // Offline support is an extra: the app works without it.
    console.warn('service worker not registered:', err);
  });
}
