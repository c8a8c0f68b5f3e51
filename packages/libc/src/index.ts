export { bindLibc, loadKoffiLibc } from './bind.js';
