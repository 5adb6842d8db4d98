/** Writes docs/operators/configuration.md from platform/config.ts (scripts/lib/configuration-page.ts). */
import { writeFileSync } from 'node:fs';
import { CONFIGURATION_PAGE, configurationPage } from './lib/configuration-page';

void configurationPage().then((page) => {
  writeFileSync(CONFIGURATION_PAGE, page);
  console.log(`wrote ${CONFIGURATION_PAGE}`);
});
