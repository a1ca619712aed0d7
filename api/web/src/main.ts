import './app.css';
import { mount } from 'svelte';
import App from './App.svelte';

const saved = localStorage.getItem('oikos.theme');
const dark = saved ? saved === 'dark' : matchMedia('(prefers-color-scheme: dark)').matches;
document.documentElement.dataset.theme = dark ? 'dark' : 'light';

mount(App, { target: document.getElementById('app')! });
