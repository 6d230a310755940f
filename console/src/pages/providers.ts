import { page } from '../ui.ts';

export async function providersPage(): Promise<void> {
  page('Sign-in providers');
}
